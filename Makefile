# Switchyard's build. `make run` and `make test` are the two commands the
# README gives; each installs what a fresh Debian 12 machine with Go 1.26
# lacks (apt packages, Node.js, npm packages, Go modules) before it does its
# work, and builds only what changed.

SHELL := /bin/bash
# The headless binary (serve, demo, check, experiment, bench), and the same
# with the Wails window.
BIN := build/bin/switchyard
DESKTOP_BIN := build/bin/switchyard-desktop

# The real model servers the integration tests run against
# (backend/realserver): CI and a checkout beside ../shared have them.
export SWITCHYARD_REALSERVERS ?= $(if $(wildcard ../shared/realservers/ollama-cpu-linux-amd64.tar.gz),$(abspath ../shared/realservers))
GO ?= go
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

# go-nvml's cgo preamble calls functions NVML marks deprecated: a wall of
# compiler warnings that say nothing about Switchyard. Every go command of
# this file builds without them.
export CGO_CFLAGS ?= -O2 -g -Wno-deprecated-declarations

# Node.js: the frontend's Vite needs 20.19+ or 22.12+. The machine's node is
# used when it is recent enough; else Node 24 from the npm registry's `node`
# package is installed under .tools/node (with Debian's nodejs and npm to
# fetch it, when the machine has no npm at all) and put first on PATH. The
# end-to-end tests bring their own Node 24 (e2e/package.json).
NODE_VERSION := 24.21.0
NODE_OK ?= $(shell node -e 'const [a,b]=process.versions.node.split(".").map(Number);process.exit(a>22||(a===22&&b>=12)||(a===20&&b>=19)?0:1)' 2>/dev/null && echo yes)
ifeq ($(NODE_OK),yes)
NODE_DEP :=
else
NODE_DEP := .tools/node/node_modules/.bin/node
export PATH := $(CURDIR)/.tools/node/node_modules/.bin:$(PATH)
endif

# Debian packages: the desktop window needs GTK and WebKitGTK headers;
# the browser and window tests need Chromium and Xvfb; the reload test
# (e2e_test.go) needs ip from iproute2 for its network namespace; the team
# tests (backend/pgtest) need PostgreSQL 15.
DESKTOP_PKGS := libgtk-3-dev libwebkit2gtk-4.0-dev pkg-config gcc
# NVML (backend/gpu) needs cgo, and cgo a C compiler: without one Go
# quietly builds the stub that reads no GPU.
CGO_PKGS := gcc libc6-dev
TEST_PKGS := chromium xvfb xauth x11-utils imagemagick curl iproute2 postgresql

# What the binaries are built from: a change to any of these rebuilds them,
# nothing else does.
GO_SRC := $(shell find . -path ./frontend -prune -o -path ./e2e -prune -o -path ./.tools -prune -o -path ./build -prune -o -path ./.git -prune -o -path ./test-artifacts -prune -o \
	-type f \( -name '*.go' -o -name '*.sql' -o -name '*.yaml' -o -name '*.json' \) -print) go.mod go.sum
UI_SRC := $(shell find frontend/src frontend/public -type f 2>/dev/null) $(wildcard frontend/index.html frontend/vite.config.* frontend/tsconfig*.json frontend/package.json)
UI := frontend/dist/index.html

.PHONY: run serve test test-go test-frontend test-node test-browser test-window build build-desktop frontend deps-desktop deps-test deps-cgo check-hosts node-deps clean bench bench-history experiment team-figures

# run: the desktop app when there is a display, else `switchyard serve`.
# `make run ADDR=127.0.0.1:9000` (or `make serve ADDR=...`) serves on
# another address. A taken address is said by switchyard in one line (exit
# status 4), and make stops there without an "Error" line of its own.
SERVE_FLAGS := $(if $(ADDR),--addr $(ADDR))
define serve_headless
	./$(BIN) serve $(SERVE_FLAGS) || { rc=$$?; [ $$rc -eq 4 ] || exit $$rc; }
endef

run:
	@if [ -n "$(ADDR)" ] || [ -z "$$DISPLAY$$WAYLAND_DISPLAY" ]; then \
		[ -n "$(ADDR)" ] || echo "No display found: running the headless server (switchyard serve)."; \
		$(MAKE) --no-print-directory build && $(serve_headless); \
	else \
		$(MAKE) --no-print-directory build-desktop && exec ./$(DESKTOP_BIN); \
	fi

serve: build
	@$(serve_headless)

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

# deps-cgo: a C compiler when Go has none (on Debian), so every build has NVML.
deps-cgo:
	@if [ "$$($(GO) env CGO_ENABLED)" != 1 ] && command -v dpkg >/dev/null; then \
		echo "No C compiler: installing one so that the build reads NVIDIA GPUs (NVML needs cgo)."; \
		$(MAKE) --no-print-directory deps-cgo-pkgs; fi

deps-cgo-pkgs:
	$(call apt_install,$(CGO_PKGS))

# The cgo state the binaries were built with: one built without cgo (the
# NVML stub) is built again once cgo works. The file changes only when the
# state does.
CGO_STAMP := build/bin/.cgo-enabled
$(CGO_STAMP): deps-cgo
	@mkdir -p $(@D); state="$$($(GO) env CGO_ENABLED)"; [ "$$(cat $@ 2>/dev/null)" = "$$state" ] || echo "$$state" > $@

# Ollama's runner listens on localhost: where the name does not resolve
# (a minimal Debian has no /etc/hosts) the real-server tests fail at
# random, late, in Ollama's log. Say so first.
HOSTS_FILE ?= /etc/hosts
check-hosts:
	@if [ ! -e "$(HOSTS_FILE)" ] || ! getent hosts localhost >/dev/null 2>&1; then \
		echo "make test: 'localhost' does not resolve here ($(HOSTS_FILE) $$([ -e "$(HOSTS_FILE)" ] && echo 'has no localhost line' || echo 'is missing')):"; \
		echo "  the real servers' tests need it. Fix: echo '127.0.0.1 localhost' | $(if $(SUDO),$(SUDO) )tee -a /etc/hosts"; \
		exit 1; fi

.tools/node/node_modules/.bin/node:
	@command -v npm >/dev/null || { echo "No npm on this machine: installing Debian's nodejs and npm to fetch Node $(NODE_VERSION)."; \
		$(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends nodejs npm; }
	@echo "Node.js $$(node --version 2>/dev/null || echo none) is older than the frontend needs: installing Node $(NODE_VERSION) under .tools/node."
	npm install --prefix .tools/node --no-save --no-audit --no-fund --loglevel=error node@$(NODE_VERSION) npm@11
	@touch $@

frontend/node_modules/.package-lock.json: frontend/package-lock.json $(NODE_DEP)
	cd frontend && npm ci --no-audit --no-fund --loglevel=error
	@touch $@

e2e/node_modules/.package-lock.json: e2e/package-lock.json $(NODE_DEP)
	cd e2e && npm ci --no-audit --no-fund --loglevel=error
	@touch $@

node-deps: frontend/node_modules/.package-lock.json e2e/node_modules/.package-lock.json

$(UI): frontend/node_modules/.package-lock.json $(UI_SRC)
	cd frontend && npm run build
	@touch $@

frontend: $(UI)

$(BIN): $(UI) $(GO_SRC) $(CGO_STAMP)
	$(GO) build -o $(BIN) .

$(DESKTOP_BIN): $(UI) $(GO_SRC) $(CGO_STAMP)
	$(GO) build -tags desktop,production -ldflags "-w -s" -o $(DESKTOP_BIN) .

# build: the headless binary (serve, demo, experiment, check, bench).
build: $(BIN)

# build-desktop: the binary with the Wails window (needs GTK/WebKit).
build-desktop: deps-desktop $(DESKTOP_BIN)

# test: everything CI runs, every stage even when one fails, with the
# failures listed at the end: go vet; Go unit, integration, load and crash
# tests under the race detector (real llama-server and Ollama included);
# the frontend's unit tests; the official npm clients and the libraries
# built on them (AI SDK, LangChain) against a live server; the UI in
# Debian's Chromium; the desktop window under Xvfb.
# The summary says which tests were skipped, and why (the real-server
# tests without SWITCHYARD_REALSERVERS, say): test-go writes each skipped
# test with its reason to $(TEST_SKIPS).
TEST_STAGES := test-vet test-go test-frontend test-node test-browser test-window
TEST_SKIPS := build/test-skips.txt
test: check-hosts deps-test node-deps $(UI)
	@rm -f $(TEST_SKIPS); failed=""; for stage in $(TEST_STAGES); do \
		echo "=== make $$stage"; start=$$(date +%s); \
		if $(MAKE) --no-print-directory $$stage; then echo "=== make $$stage: ok ($$(( $$(date +%s) - start )) s)"; \
		else echo "=== make $$stage: FAILED ($$(( $$(date +%s) - start )) s)"; failed="$$failed $$stage"; fi; \
	done; \
	skipped=""; if [ -s $(TEST_SKIPS) ]; then \
		skipped="; $$(wc -l < $(TEST_SKIPS)) Go tests were skipped (each with its reason in $(TEST_SKIPS)):"; fi; \
	if [ -n "$$failed" ]; then echo "make test: failed:$$failed$$skipped"; else echo "make test: every stage passed$$skipped"; fi; \
	if [ -s $(TEST_SKIPS) ]; then cut -d: -f2- $(TEST_SKIPS) | sort | uniq -c | sort -rn | head -10 | sed 's/^ */  /'; fi; \
	[ -z "$$failed" ]

test-vet:
	$(GO) vet ./...

# The race detector needs cgo, so the build without NVML (cgo off) has
# its own few tests, run without it. test-go prints what go test prints,
# and keeps the skipped tests with their reasons for test's summary
# (scripts/testsummary).
test-go:
	@mkdir -p $(dir $(TEST_SKIPS))
	set -o pipefail; $(GO) test -race -count=1 -json ./... | $(GO) run ./scripts/testsummary $(TEST_SKIPS)
	CGO_ENABLED=0 $(GO) test -count=1 -run 'TestStubNVML|TestServeSaysWhenItHasNoNVML' . ./backend/gpu/
	# Allocation counts, which the race detector's pool draining blurs.
	$(GO) test -count=1 -run 'Allocat' ./backend/httpapi/

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
	./$(BIN) bench --markdown docs/BENCHMARKS.md --profile build/bench --history-from docs/BENCHMARKS-history.json

# bench-history: the history-scale section alone at 10M requests (about
# ten minutes on 2 cores, 4 GB of temporary disk), into
# docs/BENCHMARKS-history.json, whose row make bench adds to the 100k and
# 1M it measures itself (docs/BENCHMARKS.md, "History at scale").
bench-history: build
	./$(BIN) bench --only history-scale --history-sizes 10000000 --budget 40m --json docs/BENCHMARKS-history.json

# team-figures: three Switchyards sharing a private PostgreSQL against the
# same three alone (a few minutes); regenerates docs/BENCHMARKS-TEAMS.md.
team-figures:
	SWITCHYARD_TEAM_FIGURES=$(CURDIR)/docs/BENCHMARKS-TEAMS.md $(GO) test -count=1 -run '^TestTeamFigures$$' -timeout 30m -v ./backend/system

clean:
	rm -rf build/bin build/bench $(TEST_SKIPS) frontend/dist/assets frontend/dist/index.html .tools
