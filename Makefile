# Switchyard's build. `make run` and `make test` are the two commands the
# README gives; each installs what a fresh Debian 12 machine with Go 1.26
# lacks (apt packages, npm packages, Go modules) before it does its work.

SHELL := /bin/bash
BIN := build/bin/switchyard

# The real model servers the integration tests run against
# (backend/realserver): CI and a checkout beside ../shared have them.
export SWITCHYARD_REALSERVERS ?= $(if $(wildcard ../shared/realservers/ollama-cpu-linux-amd64.tar.gz),$(abspath ../shared/realservers))
GO ?= go
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

# Debian packages: the desktop window needs GTK and WebKitGTK headers;
# the browser and window tests need Chromium and Xvfb.
DESKTOP_PKGS := libgtk-3-dev libwebkit2gtk-4.0-dev pkg-config gcc
TEST_PKGS := chromium xvfb xauth x11-utils imagemagick curl

.PHONY: run serve test test-go test-frontend test-node test-browser test-window build build-desktop frontend deps-desktop deps-test node-deps clean bench experiment

# run: the desktop app when there is a display, else `switchyard serve`.
run:
	@if [ -n "$$DISPLAY$$WAYLAND_DISPLAY" ]; then \
		$(MAKE) --no-print-directory build-desktop && exec ./$(BIN); \
	else \
		echo "No display found: running the headless server (switchyard serve)."; \
		$(MAKE) --no-print-directory build && exec ./$(BIN) serve; \
	fi

serve: build
	./$(BIN) serve

# apt installs only what is missing, so repeated runs are quick.
define apt_install
	@missing=""; for p in $(1); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
		echo "Installing Debian packages:$$missing"; \
		$(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends $$missing; \
	fi
endef

deps-desktop:
	$(call apt_install,$(DESKTOP_PKGS))

deps-test:
	$(call apt_install,$(TEST_PKGS) $(DESKTOP_PKGS))

frontend/node_modules/.package-lock.json: frontend/package-lock.json
	cd frontend && npm ci --no-audit --no-fund
	@touch $@

e2e/node_modules/.package-lock.json: e2e/package-lock.json
	cd e2e && npm ci --no-audit --no-fund
	@touch $@

node-deps: frontend/node_modules/.package-lock.json e2e/node_modules/.package-lock.json

frontend: frontend/node_modules/.package-lock.json
	cd frontend && npm run build

# build: the headless binary (serve, demo, experiment, check, bench).
build: frontend
	$(GO) build -o $(BIN) .

# build-desktop: the same binary with the Wails window (needs GTK/WebKit).
build-desktop: deps-desktop frontend
	CGO_CFLAGS="-O2 -g -Wno-deprecated-declarations" $(GO) build -tags desktop,production -ldflags "-w -s" -o $(BIN) .

# test: everything CI runs. Go unit, integration, load and crash tests
# under the race detector; the official npm clients and the libraries
# built on them (AI SDK, LangChain) against a live server;
# the UI in Debian's Chromium; the desktop window under Xvfb.
test: deps-test node-deps frontend
	$(GO) vet ./...
	$(MAKE) --no-print-directory test-go test-frontend test-node test-browser test-window

test-go:
	$(GO) test -race -count=1 ./...

test-frontend: frontend/node_modules/.package-lock.json
	cd frontend && npm test

# The end-to-end tests run on the Node that e2e installs itself (npm's
# "node" package, pinned in e2e/package.json): current client libraries
# (openai, the AI SDK, LangChain) need Node 22 or later.
E2E_NODE := ./node_modules/.bin/node

test-node: build e2e/node_modules/.package-lock.json
	cd e2e && $(E2E_NODE) --test clients.test.mjs libs.test.mjs

test-browser: build e2e/node_modules/.package-lock.json
	cd e2e && $(E2E_NODE) --test ui.test.mjs

test-window: build-desktop
	./scripts/window-smoke.sh

experiment: build
	./$(BIN) experiment

# bench: Switchyard against a bare reverse proxy and the upstream itself,
# on loopback (a few minutes); regenerates docs/BENCHMARKS.md and the CPU
# and allocation profiles it summarises, in build/bench/.
bench: build
	./$(BIN) bench --markdown docs/BENCHMARKS.md --profile build/bench

clean:
	rm -rf build/bin frontend/dist/assets frontend/dist/index.html
