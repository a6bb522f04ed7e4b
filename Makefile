# mallocsweep — every target installs what it needs first, so each works alone on a fresh machine.
SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMPS := .stamps

# Debian packages the suite drives. glibc is always there; the allocators under test; gcc for test
# binaries and the keep_thp shim; maven + a JRE for the MongoDB stand-in; chromium to check reports render;
# debootstrap for the server roots of `mallocsweep servers fetch`; libmariadb-dev + pkg-config to
# build mysqlclient (iibench's C driver); mariadb-plugin-rocksdb for the rocksdb engine (MyRocks);
# openssh-server for the tests' stand-in client and fleet hosts (an sshd in a network namespace,
# never the system's).
DEB_PACKAGES := mariadb-server mariadb-client mariadb-plugin-rocksdb sysbench debootstrap \
                libjemalloc2 libtcmalloc-minimal4 libgoogle-perftools4 libmimalloc2.0 libtbbmalloc2 \
                linux-perf gcc maven default-jre-headless chromium \
                libmariadb-dev pkg-config openssh-server
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

SUITE ?= configs/suites/quick.toml
OUT   ?= runs

.PHONY: help setup deps venv helper standin run test test-unit test-integration test-kit check-install stress bench lint clean

help:
	@echo "make run     install what is missing, then run the quick suite on MariaDB with every allocator found"
	@echo "make test    install what is missing, then run unit and integration tests (real servers)"
	@echo "make check-install  pip install . (not editable) from a clean clone; doctor and smoke from it"
	@echo "make test-kit  build a kit, run the smoke suite from it on a bare Debian root without network"
	@echo "make stress  the long fault campaign (signals, kills, bad settings; ~50 faults)"
	@echo "make bench   performance figures of the tool itself, as side-by-side ratios"
	@echo "make lint    ruff"
	@echo "make setup   only the installation (idempotent)"

setup: deps venv helper standin

# Installs only the Debian packages that are missing; a no-op when all are present.
deps:
	@missing=""; for p in $(DEB_PACKAGES); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "install ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "Installing Debian packages:$$missing"; \
	  $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
	  $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing >/dev/null; \
	fi

venv: $(STAMPS)/venv

$(STAMPS)/venv: pyproject.toml
	@mkdir -p $(STAMPS)
	@[ -x $(PY) ] || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev,fleet]'
	@touch $@

# The exec helper every child starts through (servers/exec/msexec.c; found by servers/exec_helper.py).
MSEXEC := $(VENV)/libexec/mallocsweep/msexec
helper: $(MSEXEC)

$(MSEXEC): servers/exec/msexec.c | $(STAMPS)/venv
	@mkdir -p $(dir $@)
	gcc -O2 -Wall -Wextra -Werror -o $@.tmp $< && mv $@.tmp $@

# The MongoDB wire-protocol stand-in (no mongod is packaged for this machine); tests only.
standin: $(if $(wildcard tests/standin/pom.xml),$(STAMPS)/standin)

$(STAMPS)/standin: tests/standin/pom.xml tests/standin/src/main/java/mallocsweep/StandIn.java
	@mkdir -p $(STAMPS)
	cd tests/standin && (mvn -q -B -o package -DskipTests >/dev/null 2>&1 || mvn -q -B package -DskipTests)
	@touch $@

run: setup
	$(VENV)/bin/mallocsweep run $(SUITE) --out $(OUT)

# Two workers (pytest-xdist; tests/conftest.py says how tests are grouped between them, and why
# the longest groups go first: --no-loadscope-reorder keeps that order). The ten slowest tests,
# the test time of each worker and of the longest groups, and the session's total close the
# output (CI's log keeps them).
TEST_WORKERS ?= 2
# The kit's end-to-end test (a kit build and a run on a bare root, ~30 min) is make test-kit's own:
# left out here rather than collected and skipped.
test: setup
	$(PY) -m pytest -q -ra --durations=30 -n $(TEST_WORKERS) --dist loadgroup --no-loadscope-reorder \
	  --ignore=tests/integration/test_kit.py tests

test-unit: venv helper
	$(PY) -m pytest -q -ra tests/unit

test-integration: setup
	$(PY) -m pytest -q -ra tests/integration

# The kit end to end (issue 37; tests/integration/test_kit.py): `mallocsweep kit build` with the
# host's MariaDB, the archive unpacked on a bare Debian minbase root (no python3, mariadb, sysbench
# or apt) and the smoke suite run there under chroot in a network namespace with only loopback.
# Not in make test: the build alone is minutes of apt, pip and compression (see the README's kit
# section for the measured times). The minimal root is debootstrapped once into .cache/servers.
test-kit: setup
	MALLOCSWEEP_TEST_KIT=1 $(PY) -m pytest -q -ra -s --durations=5 tests/integration/test_kit.py

# The package as users install it (issue 24): a clean clone of HEAD, a new venv, `pip install .`
# (not editable, pip's own downloads), then doctor, allocators and the smoke suite from outside
# the clone, in a new directory under /tmp that is left for a look. Minutes (downloads, one real
# run); make test has the cheap version (tests/integration/test_install.py).
check-install: deps
	@set -e; d=$$(mktemp -d /tmp/ms-check-install.XXXXXX); echo "check-install in $$d"; \
	git clone -q . $$d/clone; \
	$(PYTHON) -m venv $$d/check-venv; \
	$$d/check-venv/bin/pip install -q $$d/clone; \
	mkdir $$d/elsewhere; cd $$d/elsewhere; \
	export MALLOCSWEEP_CACHE=$$d/cache MALLOCSWEEP_STATE=$$d/state; \
	../check-venv/bin/mallocsweep doctor --json > doctor.json; \
	../check-venv/bin/mallocsweep allocators --json > allocators.json; \
	../check-venv/bin/mallocsweep run ../clone/configs/suites/smoke.toml --out runs --quiet; \
	echo "check-install: ok ($$d)"

# The long fault campaign (~50 faults; MALLOCSWEEP_STRESS_SEED repeats one, it is printed).
stress: setup
	MALLOCSWEEP_STRESS_FAULTS=$${MALLOCSWEEP_STRESS_FAULTS:-50} $(PY) -m tests.integration.fault_campaign

bench: setup
	$(PY) -m bench

lint: venv
	$(VENV)/bin/ruff check suites servers collectors analysis rundir bench tests
	$(VENV)/bin/ruff format --check suites servers collectors analysis rundir bench tests

clean:
	rm -rf $(VENV) $(STAMPS) .pytest_cache .ruff_cache *.egg-info
