"""``queue-web``: the HTTP API and the dashboard, served by uvicorn until told to stop.

Follows the daemon conventions: the first SIGTERM/SIGINT stops gracefully
(uvicorn finishes the requests in flight, the pools close) and the process
exits 0; a second one exits 130 at once. Logs go to stderr as text or JSON
lines (``--log-format``), uvicorn's own loggers included. Exit codes
(:class:`~queue_engine.foundation.exit_codes.ExitCode`): ``USAGE`` for a configuration
error (a malformed token list, a bad schema), ``UNAVAILABLE`` when the port
cannot be bound. A database that is down at start is *not* fatal: the server
starts, ``/health`` answers and ``/ready`` says 503 until the database is back.

It listens on 127.0.0.1 unless ``--host`` says otherwise: exposing it is a
decision (put it behind TLS; see docs/guides/web.md). With no credential
configured it prints a sign-in link on loopback and refuses (``USAGE``) any
other address (:mod:`queue_engine.web.first_run`).
"""

from __future__ import annotations

import contextlib
import logging
import socket
from collections.abc import Callable, Iterator

import click

from queue_engine.cli.common import dsn_option, log_options, run_cli, schema_option, setting_option
from queue_engine.daemon.signals import StopSignals
from queue_engine.foundation import settings as table
from queue_engine.foundation.config import validate_schema
from queue_engine.foundation.errors import ConfigError, QueueEngineError
from queue_engine.foundation.exit_codes import ExitCode
from queue_engine.foundation.logs import log_event, setup_logging
from queue_engine.foundation.version import __version__

log = logging.getLogger("queue_engine.web")


#: How long a stop waits for requests in flight before ending them (below the
#: unit's TimeoutStopSec=30s, so the stop is a clean exit 0, not a SIGKILL).
GRACEFUL_STOP_S = 25


class ListenError(QueueEngineError):
    """The address cannot be listened on (``EX_UNAVAILABLE``: a systemd unit retries)."""

    exit_code = ExitCode.UNAVAILABLE


@click.command(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@dsn_option
@schema_option
@log_options
@setting_option(table.WEB_HOST)
@setting_option(table.WEB_PORT)
@setting_option(table.WEB_READ_DSN)
@setting_option(table.WEB_PRODUCER_DSN)
@setting_option(table.WEB_READ_ONLY)
@setting_option(table.WEB_COMPAT)
@click.version_option(__version__, prog_name="queue-web")
def web(
    dsn: str,
    schema: str,
    log_format: str,
    log_level: str,
    host: str,
    port: int,
    read_dsn: str | None,
    producer_dsn: str | None,
    read_only: str,
    compat: str,
) -> int:
    """Serve the HTTP API (/api/v1, /health, /ready, /info) and the dashboard.

    With --compat dataloader, the trigger, status and cancel routes, /health
    and /info answer as dataloader's HTTP API v1 did, for its clients
    unchanged (see docs/guides/web.md, "dataloader compatibility").

    Credentials come from the environment only: API bearer tokens in
    QUEUE_ENGINE_WEB_TOKENS as scope:token,... and dashboard logins in
    QUEUE_ENGINE_WEB_USERS as name:scope:password,... (see docs/guides/web.md).
    With neither, on loopback it prints a sign-in link (operator, until it
    stops); on any other address it refuses to start (exit 2).
    """
    try:
        validate_schema(schema)
    except ConfigError as exc:
        raise click.BadParameter(str(exc), param_hint="--schema") from None
    setup_logging(log_format, log_level)
    # Imported here: without the [web] extra, `queue-web --help` still works
    # and a missing extra is one clear line.
    try:
        import uvicorn

        from queue_engine.web.app import create_app
        from queue_engine.web.compat.dataloader import check_compat
        from queue_engine.web.first_run import sign_in_link
        from queue_engine.web.pages import end_event_streams
        from queue_engine.web.settings import WebSettings
    except ImportError as exc:
        raise ConfigError(
            f"queue-web needs the web extra: pip install 'queue-engine[web]' ({exc.name} is missing)"
        ) from None
    settings = WebSettings.from_env(
        dsn=dsn,
        schema=schema,
        host=host,
        port=port,
        read_dsn=read_dsn,
        producer_dsn=producer_dsn,
        read_only=read_only == "on",
        compat=compat.lower(),
    )
    check_compat(settings)  # anonymous dataloader routes: loopback unless forced, else exit 2
    link = sign_in_link(settings)  # nothing configured: a link on loopback, else exit 2
    app = create_app(settings, sign_in_link=link)

    def listening(port: int) -> None:
        # Once bound, so the link works when it is read and carries the real
        # port (--port 0); printed on stdout, never logged, so the log (stderr,
        # maybe JSON) holds one warning and no token.
        if link is None:
            return
        log_event(
            log,
            logging.WARNING,
            "web.sign_in_link",
            why=f"no {table.WEB_USERS.env} or {table.WEB_TOKENS.env} configured: "
            "the link on stdout signs a browser in as operator until queue-web stops",
        )
        click.echo(f"Sign in as operator: {link.url(settings.host, port)}")

    config = uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        log_config=None,  # keep the root logger setup_logging installed (text or JSON)
        access_log=False,
        lifespan="on",
        server_header=False,
        proxy_headers=False,
        timeout_graceful_shutdown=GRACEFUL_STOP_S,
    )
    server = _Server(config, on_listening=listening)

    def stop() -> None:
        # Open dashboards' event streams never end by themselves, and uvicorn's
        # graceful stop waits for every open response: end them first.
        end_event_streams(app)
        server.request_stop()

    signals = StopSignals("web", on_first=stop, logger=log)
    signals.install()
    log_event(log, logging.INFO, "web.started", host=settings.host, port=settings.port)
    try:
        server.run()
    except SystemExit:  # uvicorn exits 1 when it cannot bind
        if server.started:
            raise
    if not server.started:
        raise ListenError(
            f"could not listen on {settings.host}:{settings.port} (in use, or not an address here)"
        )
    log_event(log, logging.INFO, "web.stopped")
    return ExitCode.OK


class _Server:
    """uvicorn's server, with the stop signals handled by :class:`StopSignals`.

    uvicorn installs its own handlers and, after a graceful stop, raises the
    caught signal again so the process dies of it (exit -15, not 0); the
    daemons' contract is exit 0 on a first SIGTERM, so the handlers stay ours.
    ``on_listening`` is called with the bound port once it listens.
    """

    def __init__(self, config: object, on_listening: Callable[[int], None]) -> None:
        import uvicorn

        class Server(uvicorn.Server):
            @contextlib.contextmanager
            def capture_signals(self) -> Iterator[None]:
                yield

            async def startup(self, sockets: list[socket.socket] | None = None) -> None:
                await super().startup(sockets)
                if self.started:
                    on_listening(int(self.servers[0].sockets[0].getsockname()[1]))

        assert isinstance(config, uvicorn.Config)
        self._server = Server(config)

    @property
    def started(self) -> bool:
        """True once uvicorn was listening."""
        return bool(self._server.started)

    def request_stop(self) -> None:
        """What the first signal does: uvicorn finishes the requests in flight and returns."""
        log_event(log, logging.INFO, "web.stopping")
        self._server.should_exit = True

    def run(self) -> None:
        """Serve until stopped."""
        self._server.run()


def main(argv: list[str] | None = None) -> None:
    """Entry point of the ``queue-web`` console script."""
    run_cli(web, "queue-web", argv)
