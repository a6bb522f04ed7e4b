"""The MongoDB wire-protocol stand-in for integration tests: built on first use, as `make standin`
does. A test skips only when a JRE or Maven is truly missing (then it cannot be built or run)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
STANDIN_DIR = REPO / "tests" / "standin"
STANDIN = STANDIN_DIR / "mongod-standin"
JAR = STANDIN_DIR / "target" / "standin.jar"
SOURCES = [STANDIN_DIR / "pom.xml", *sorted((STANDIN_DIR / "src").rglob("*.java"))]


def ensure_standin() -> Path:
    """The stand-in's mongod-like wrapper, its jar (re)built when missing or older than a source."""
    if shutil.which("java") is None:
        pytest.skip("the MongoDB stand-in needs a JRE (`make setup` installs default-jre-headless)")
    stale = not JAR.is_file() or any(s.stat().st_mtime > JAR.stat().st_mtime for s in SOURCES)
    if stale:
        if shutil.which("mvn") is None:
            pytest.skip(f"{JAR} is missing or stale and Maven is not installed (`make setup`)")
        build = "mvn -q -B -o package -DskipTests || mvn -q -B package -DskipTests"
        done = subprocess.run(["sh", "-c", build], cwd=STANDIN_DIR, capture_output=True)
        assert done.returncode == 0, done.stdout.decode()[-2000:] + done.stderr.decode()[-2000:]
    return STANDIN
