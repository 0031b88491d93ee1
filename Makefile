# SPDX-License-Identifier: MIT
# The two commands of the README:
#   make run    set up everything (system packages when root, .venv) and run the quick measurement
#   make test   set up everything and run all tests (C unit tests with sanitizers, ruff, pytest)
SHELL := /bin/bash
VENV ?= .venv
ARGS ?=

.PHONY: setup run test lint clean

setup:
	@./scripts/setup.sh

run: setup
	$(VENV)/bin/rtlab run $(ARGS)

test: setup
	@./scripts/test.sh

lint: setup
	$(VENV)/bin/ruff check rtlab tests bench

clean:
	rm -rf build .venv .pytest_cache .ruff_cache
