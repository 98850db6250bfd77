"""A running Jupyter server driven as a browser drives it: its REST API and
a kernel's websocket (Jupyter's messaging protocol, messages as JSON). The
test of `make notebook` (tests/integration/test_notebooks.py) and the course
VM's check of its forwarded port (scripts/vm-jupyter.sh) both use it.

    python -m tortoiselab.jupyter_api http://127.0.0.1:8888 TOKEN 'import sys; print(sys.executable)'

runs one cell in a new python3 kernel of that server, prints its outputs as
JSON lines and deletes the kernel's session again; exit 1 if the cell
raised.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import urllib.request
from contextlib import contextmanager
from typing import Iterator

import websocket
from jupyter_client.jsonutil import json_default
from jupyter_client.session import Session


def get(url: str, token: str, timeout_s: float = 30) -> tuple[int, bytes]:
    req = urllib.request.Request(url, headers={"Authorization": f"token {token}"})
    with urllib.request.urlopen(req, timeout=timeout_s) as r:
        return r.status, r.read()


def api(method: str, url: str, token: str, body: dict | None = None) -> dict:
    req = urllib.request.Request(url, method=method, data=json.dumps(body).encode() if body else None,
                                 headers={"Authorization": f"token {token}", "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as r:
        text = r.read()
        return json.loads(text) if text else {}


class Kernel:
    """A kernel of the server, on its websocket."""

    def __init__(self, ws: websocket.WebSocket) -> None:
        self.ws, self.session = ws, Session(username="tortoiselab")

    def run(self, code: str, timeout_s: float) -> list[dict]:
        """One execute_request; the cell's outputs (as a notebook stores
        them) until the kernel is idle again."""
        msg = self.session.msg("execute_request", {"code": code, "silent": False, "store_history": True,
                                                   "user_expressions": {}, "allow_stdin": False,
                                                   "stop_on_error": True})
        msg["channel"] = "shell"
        self.ws.send(json.dumps(msg, default=json_default))
        outputs, deadline = [], time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            reply = json.loads(self.ws.recv())
            if reply.get("parent_header", {}).get("msg_id") != msg["header"]["msg_id"]:
                continue
            kind = reply["msg_type"]
            if kind in ("stream", "display_data", "execute_result", "error"):
                outputs.append({"output_type": kind, **reply["content"]})
            elif kind == "status" and reply["content"]["execution_state"] == "idle":
                return outputs
        raise TimeoutError(f"the cell did not finish within {timeout_s} s: {code[:200]}")


@contextmanager
def kernel(base: str, token: str, path: str = "tortoiselab-check.ipynb",
           timeout_s: float = 300) -> Iterator[Kernel]:
    """A python3 kernel in a new session of the server at `base` (for the
    notebook at `path`), closed and deleted on the way out."""
    sess = api("POST", f"{base}/api/sessions", token, {"path": path, "type": "notebook", "kernel": {"name": "python3"}})
    try:
        ws = websocket.create_connection(f"ws{base.removeprefix('http')}/api/kernels/{sess['kernel']['id']}/channels",
                                         header=[f"Authorization: token {token}"], timeout=timeout_s)
        try:
            yield Kernel(ws)
        finally:
            ws.close()
    finally:
        api("DELETE", f"{base}/api/sessions/{sess['id']}", token)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tortoiselab.jupyter_api", description=__doc__.split("\n\n")[0])
    ap.add_argument("base", help="the server's address, e.g. http://127.0.0.1:8888")
    ap.add_argument("token")
    ap.add_argument("code", help="one cell's code")
    ap.add_argument("--timeout", type=float, default=300, help="seconds for the kernel to start and the cell to run")
    a = ap.parse_args(argv)
    with kernel(a.base.rstrip("/"), a.token, timeout_s=a.timeout) as k:
        outputs = k.run(a.code, a.timeout)
    for o in outputs:
        print(json.dumps(o, default=json_default))
    return 1 if any(o["output_type"] == "error" for o in outputs) else 0


if __name__ == "__main__":
    sys.exit(main())
