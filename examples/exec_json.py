#!/usr/bin/env python3
"""Run commands in cordon from Python through `cordon exec-json` (docs/exec-json.md).

CORDON_BIN names the cordon binary (default: `cordon` in PATH). Exits 0 when every
check passes; the integration tests run this file.
"""
import json
import os
import subprocess
import sys
import tempfile

CORDON = os.environ.get("CORDON_BIN", "cordon")


def cordon_exec(request):
    """Send one request, return the parsed result (or raise on a launcher error)."""
    proc = subprocess.run(
        [CORDON, "exec-json"],
        input=json.dumps(request).encode(),
        capture_output=True,
        timeout=60,
    )
    result = json.loads(proc.stdout)
    if not result["ok"]:
        raise RuntimeError(f"cordon: {result['error']['kind']}: {result['error']['message']}")
    return result


def main():
    with tempfile.TemporaryDirectory() as ws:
        if os.geteuid() == 0:
            # As root the sandbox runs as the workspace owner, or nobody (65534).
            os.chown(ws, 65534, 65534)
        r = cordon_exec({
            "command": "/usr/bin/python3",
            "args": ["-c", "import os,sys; print(sys.stdin.read().upper()); print(os.environ['GREETING']); open('out.txt','w').write('ok')"],
            "workspace": ws,
            "env": {"GREETING": "hello from the sandbox"},
            "stdin": "some input",
            "timeout": 30,
        })
        assert r["exit_code"] == 0, r
        assert r["stdout"]["data"] == "SOME INPUT\nhello from the sandbox\n", r["stdout"]
        assert open(os.path.join(ws, "out.txt")).read() == "ok"
        assert r["enforcement"]["landlock"]["status"] == "fully_enforced", r["enforcement"]["landlock"]
        assert r["enforcement"]["no_new_privs"] is True

        r = cordon_exec({"command": "sleep", "args": ["30"], "workspace": ws, "timeout": 1})
        assert r["timed_out"] is True, r

        r = cordon_exec({"command": "sh", "args": ["-c", "exit 7"], "workspace": ws})
        assert r["exit_code"] == 7, r

        try:
            cordon_exec({"command": "does-not-exist", "workspace": ws})
            raise AssertionError("expected an error")
        except RuntimeError as e:
            assert "command_not_found" in str(e), e
    print("python exec-json example: OK")


if __name__ == "__main__":
    sys.exit(main())
