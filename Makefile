# SPDX-License-Identifier: MIT
# The two commands of the README:
#   make run    set up what running needs (system packages when root, .venv, engines)
#               and run the quick measurement
#   make test   set up what testing needs (the above and every test's tools) and run
#               all tests (C unit tests with sanitizers, ruff, pytest)
# Neither set-up leaves a service enabled or running (docs/setup.md).
SHELL := /bin/bash
VENV ?= .venv
ARGS ?=

.PHONY: setup setup-run setup-test run test lint clean

setup: setup-test

setup-run:
	@VENV=$(VENV) ./scripts/setup.sh run

setup-test:
	@VENV=$(VENV) ./scripts/setup.sh test

run: setup-run
	$(VENV)/bin/rtlab run $(ARGS)

test: setup-test
	@VENV=$(VENV) ./scripts/test.sh

lint: setup-test
	$(VENV)/bin/ruff check rtlab tests bench

clean:
	rm -rf build .venv .pytest_cache .ruff_cache
