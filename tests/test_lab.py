"""`make lab` serves notebooks/ on 127.0.0.1, and a lesson's .md opens as a notebook."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request

import pytest

from conftest import ROOT

TOKEN = "tpututor-test"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(url: str) -> dict:
    req = urllib.request.Request(url, headers={"Authorization": f"token {TOKEN}"})
    with urllib.request.urlopen(req, timeout=10) as resp:
        return json.loads(resp.read())


@pytest.mark.slow
def test_make_lab_serves_lessons_and_opens_md_as_a_notebook():
    port = free_port()
    args = f"--no-browser --ServerApp.token={TOKEN} --ServerApp.port_retries=0"
    proc = subprocess.Popen(
        ["make", "--no-print-directory", "lab", f"LAB_PORT={port}", f"LAB_ARGS={args}"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                get(f"{base}/api/status")
                break
            except (urllib.error.URLError, ConnectionError, OSError):
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"JupyterLab did not answer on {base}:\n{proc.stdout.read()[-3000:]}")
                time.sleep(0.5)
        listing = get(f"{base}/api/contents")
        names = {item["name"] for item in listing["content"]}
        assert "00a_where_am_i.md" in names and "00a_where_am_i.ipynb" in names
        nb = get(f"{base}/api/contents/00a_where_am_i.md?type=notebook&content=1")
        assert nb["type"] == "notebook"
        assert nb["content"]["cells"][0]["source"].startswith("# 00a ·")
        with urllib.request.urlopen(f"{base}/lab?token={TOKEN}", timeout=10) as resp:
            assert resp.status == 200
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=2)
