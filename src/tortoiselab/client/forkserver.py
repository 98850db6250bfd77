"""python -m tortoiselab.client.forkserver: the page loader, started once and
forked once per load.

Inside the lab guest a Python start with the loader's imports (ssl,
asyncio, h2, dnspython) costs a few hundred milliseconds of CPU per load,
more than the load's own work. This process starts once in the client's
network namespace, imports the loader, and then waits on its stdin. For
each request it forks a child that runs the loader's main with the
request's arguments, exactly as `python -m tortoiselab.client ARGS` would;
every child starts from the same parent state (the parent never loads a
page, opens a socket or starts a thread), so a load is the same whether it
is the first this process served or a later one.

Protocol, one JSON object per line:

    stdin   {"argv": ["https://www.lab.test/", "--ca", ...], "log": "/path/loader.log"}
    stdout  {"pid": 1234}                   as soon as the child is forked
            {"pid": 1234, "rc": 0}          when it has exited (rc -N: killed by signal N)

The child's stdout and stderr go to the request's log file. The caller may
kill the child by its pid (a hung load); the parent reports it as usual.
End of stdin ends the process.
"""

from __future__ import annotations

import json
import os
import sys
import traceback

from . import __main__ as client_main

EXIT_CRASH = 70  # the child raised instead of returning (sysexits' EX_SOFTWARE)


def _child(argv: list[str], log: str) -> None:
    """In the forked child: the loader's main, its output into the log; never returns."""
    rc = EXIT_CRASH
    try:
        fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.close(fd)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        rc = client_main.main(argv)
    except SystemExit as exc:
        rc = exc.code if isinstance(exc.code, int) else 1
    except BaseException:  # noqa: BLE001 - the child must exit whatever happened
        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        os._exit(rc)


def _reply(obj: dict) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def serve() -> int:
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            req = json.loads(line)
            argv, log = [str(a) for a in req["argv"]], str(req["log"])
        except (ValueError, KeyError, TypeError) as exc:
            _reply({"error": f"bad request: {exc}"})
            continue
        pid = os.fork()
        if pid == 0:
            _child(argv, log)
        _reply({"pid": pid})
        _, status = os.waitpid(pid, 0)
        _reply({"pid": pid, "rc": os.waitstatus_to_exitcode(status)})
    return 0


if __name__ == "__main__":
    sys.exit(serve())
