"""host/provenance.tool_versions: the version probes run side by side,
each answered as before one after the other (the record's meta.tools)."""

from __future__ import annotations

import sys
import time

from tortoiselab.host import provenance as P


def test_probes_run_side_by_side_and_each_gets_its_own_output(tmp_path):
    sleep = [sys.executable, "-c", "import time, sys; time.sleep(0.4); print(sys.argv[1])"]
    t0 = time.monotonic()
    out = P.outputs({f"p{i}": [*sleep, f"v{i}"] for i in range(4)})
    assert time.monotonic() - t0 < 1.2  # not 4 x 0.4 s
    assert {k: v[0].strip() for k, v in out.items()} == {f"p{i}": f"v{i}" for i in range(4)}


def test_a_probe_that_cannot_start_says_nothing_or_hangs_is_not_found(tmp_path):
    out = P.outputs({"missing": [str(tmp_path / "no-such-tool"), "-v"],
                     "silent": [sys.executable, "-c", "pass"],
                     "stderr": [sys.executable, "-c", "import sys; sys.stderr.write('tool 1.2\\nmore\\n')"],
                     "hangs": [sys.executable, "-c", "import time; time.sleep(30)"]}, timeout_s=0.5)
    assert out["missing"] is None and out["hangs"] is None
    assert [P.first_line(out[k]) for k in ("missing", "silent", "stderr", "hangs")] == \
        ["not found", "not found", "tool 1.2", "not found"]


def test_tool_versions_names_every_tool_and_the_revision():
    v = P.tool_versions()
    assert set(v) == {"python", *P.VERSION_PROBES, "tortoiselab_git", "tortoiselab_dirty"}
    assert v["python"] == sys.version.split()[0] and isinstance(v["tortoiselab_dirty"], bool)
    assert all(isinstance(v[k], str) and v[k] and "\n" not in v[k] for k in P.VERSION_PROBES)
