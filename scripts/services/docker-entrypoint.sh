#!/bin/sh
# Entry point of the kv-flywheel image: credentials from a file, the model prepared once, then the command.
#
# FLYWHEEL_DB_FILE: path of a file (e.g. a compose/swarm secret) holding the catalog URL;
#   read into FLYWHEEL_DB so the URL with its password never appears in the compose file or
#   in `docker inspect`.
# FLYWHEEL_PREPARE_MODEL=0 skips the model preparation (e.g. for the Dask scheduler).
set -eu

if [ -n "${FLYWHEEL_DB_FILE:-}" ]; then
    FLYWHEEL_DB="$(cat "$FLYWHEEL_DB_FILE")"
    export FLYWHEEL_DB
fi

if [ "${FLYWHEEL_PREPARE_MODEL:-1}" = "1" ]; then
    # Idempotent: the first start assembles and dequantizes into $FLYWHEEL_MODEL_CACHE, later ones load it.
    flywheel prepare-model >&2
fi
touch /tmp/flywheel-ready    # the compose healthcheck's marker: the model is ready here

exec "$@"
