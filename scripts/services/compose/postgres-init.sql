-- Run once by the postgres image on an empty data volume, as $POSTGRES_USER.
-- The Prefect server keeps its own state in a separate database from the flywheel catalog.
CREATE DATABASE prefect;
