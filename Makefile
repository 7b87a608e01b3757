# `make test` installs everything the tests need and runs the whole suite (README command 2); CI runs it (.ci/run).
# `make unit` is the contributor's loop: the unit tier from the sources, no control plane, no compile (CONTRIBUTING.md).
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
DEBIAN_PACKAGES := prometheus chromium gcc podman runc mmdebstrap
# `make images` builds from the official Python image the Dockerfiles name, fully qualified (podman guesses no
# registry; that one must be reachable). `make test` builds from CI_BASE_IMAGE, made here from Debian packages
# by `scripts/images base`, so that it needs no registry.
BASE_IMAGE ?= docker.io/library/python:3.11.11-slim-bookworm
CI_BASE_IMAGE := localhost/kuota/python-base:bookworm
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
PHASE := scripts/phase

.PHONY: test install system-packages control-plane lint images ci-images pytest unit

test: system-packages install control-plane lint ci-images pytest

system-packages:
	@$(PHASE) "Debian packages ($(DEBIAN_PACKAGES))" bash -c 'missing=$$(for p in $(DEBIAN_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
		[ -z "$$missing" ] || { $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends $$missing; }; \
		systemctl disable --now prometheus >/dev/null 2>&1 || true'

install:
	@$(PHASE) "Python environment ($(VENV))" bash -c '[ -x $(BIN)/python ] || $(PYTHON) -m venv $(VENV); \
		find kuota -name "*.so" -delete; \
		$(BIN)/pip install -q --upgrade pip && $(BIN)/pip install -q -e ".[test]"'

control-plane:
	@$(PHASE) "control-plane and Kueue binaries (cached in ~/.cache/kuota)" $(BIN)/python -m tests.cluster build

# kuota/manager:VERSION and kuota/exporter:VERSION in podman's store, and OCI archives of both in build/images.
images:
	@$(PHASE) "images from $(BASE_IMAGE) (layers cached in ~/.cache/kuota/containers)" scripts/images build $(BASE_IMAGE)

ci-images:
	@$(PHASE) "base image from Debian packages (cached)" scripts/images base $(CI_BASE_IMAGE)
	@$(MAKE) --no-print-directory images BASE_IMAGE=$(CI_BASE_IMAGE)

lint:
	@$(PHASE) "ruff" $(BIN)/ruff check .
	@$(PHASE) "ruff format" $(BIN)/ruff format --check .
	@$(PHASE) "generated gRPC code is current" $(BIN)/python -m kuota.exporter.podresources.generate --check
	@$(PHASE) "mypy --strict" $(BIN)/mypy
	@$(PHASE) "import-linter (the walls between planes)" $(BIN)/lint-imports

pytest:
	@$(PHASE) "pytest" $(BIN)/pytest -p no:cacheprovider -q -ra --durations=15

# The engine from its sources even where `make install` compiled it (tests/conftest.py), so an edit needs no
# compile; the chart's tests need helm, built once into ~/.cache/kuota by `make control-plane`.
unit:
	@$(PHASE) "unit tests (sources; no control plane)" env KUOTA_PURE_PYTHON=1 KUOTA_QUICK_PROPERTIES=1 $(BIN)/pytest -p no:cacheprovider -q -m "not integration" tests/unit
