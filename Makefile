# Two commands: `make book` builds the HTML book, `make test` runs every test.
# Both create .venv on first use (pinned requirements.txt + editable minigrad).
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
TEST_JOBS ?= 2
# MKL may use fewer threads than asked when the machine is busy (MKL_DYNAMIC), and a
# matrix product's rounding follows its thread count: two steps a notebook compares bit
# for bit (ch00's plain and checkpointed step) could differ under load. A fixed count.
export MKL_DYNAMIC := FALSE
NBVAL  := --nbval --nbval-current-env --nbval-sanitize-with tests/nbval_sanitize.cfg
PHASE  := $(BIN)/python scripts/timed.py
# Every notebook for nbval, the slowest first: each runs whole on one worker, so the
# two workers finish together (a folder argument would be collected in name order).
# Named by slug: the numbers come from the file names, which follow _toc.yml
# (a continuation page, chNNb_slug, by its own slug).
NB_SLOW  := $(foreach s,beyond_one_device sqrt_rule hugging_face cost_in_time \
              memory_did_not_go_down applications selective_recomputation offloading \
              formula_vs_measurement,$(wildcard notebooks/ch[0-9][0-9]*_$(s).ipynb))
NB_ORDER := $(NB_SLOW) $(filter-out $(NB_SLOW),$(sort $(wildcard notebooks/*.ipynb)))

.PHONY: book test notebooks unit compat clean venv benchmark chromium screens metrics fix check html

venv: $(STAMP)

$(STAMP): requirements.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -r requirements.txt
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation -e .
	touch $(STAMP)

# HTML book in _build/html, every notebook executed. Executions are cached by
# jupyter-cache, keyed on the library too (a change under minigrad/ or bookkit/
# empties the cache), and every page is re-read, so a broken reference fails
# every build, not only the first (scripts/build_book.py).
book: $(STAMP)
	$(BIN)/python scripts/build_book.py

# The whole suite, in phases (each prints its time; the list is repeated at the end):
#  1. unit, property and notebook-structure tests;
#  2. strict nbval on every notebook (figures included), natively, against outputs that
#     scripts/execute_notebooks.py stored on a simulated different CPU
#     (scripts/simulated_cpu.py): printed numbers must hold on every CPU;
#  3. the HTML book, rendered from the stored outputs that 2 just proved;
#  4. the built book in headless Chromium, the Colab-style run, build mechanics.
# Chromium is checked first (installed with apt-get when root, else one clear line).
test: $(STAMP) chromium
	@mkdir -p _build && rm -f _build/test-phases.txt
	$(PHASE) "1 unit and notebook-structure tests" -- \
		$(BIN)/python -m pytest -n $(TEST_JOBS) -q -m "not book" tests
	$(PHASE) "2 notebooks, this CPU against the simulated CPU's outputs (strict nbval)" -- \
		$(BIN)/python -m pytest -n $(TEST_JOBS) --dist loadfile -q --durations=5 $(NBVAL) $(NB_ORDER)
	$(PHASE) "3 book from the checked outputs" -- \
		$(BIN)/python scripts/build_book.py --stored-outputs
	$(PHASE) "4 built book, Colab run, build checks" -- \
		$(BIN)/python -m pytest -n $(TEST_JOBS) --dist loadfile -q -m book tests
	@cat _build/test-phases.txt
	@! grep -q FAILED _build/test-phases.txt && echo "make test: every phase passed"

# A screenshot tour of the built book for layout review (not committed): every page's
# first screen and one mid-page screen at 1280 px and its first screen at 390 px, in
# _build/screens/ (open index.html there), then the browser test's measurements per page
# (squashed figures, split words, wrapped code, long cells, heights, weight). Builds the
# book from the stored outputs first.
screens: $(STAMP) chromium
	$(BIN)/python scripts/build_book.py --stored-outputs
	$(BIN)/python scripts/screens.py
	$(BIN)/python scripts/screens.py --metrics --json _build/screens/metrics.json

# What a reader sees of each notebook: visible plumbing lines, clipped lines, figures by
# format, words per chapter (scripts/reading_metrics.py; exit 1 over the goals).
metrics: $(STAMP)
	$(BIN)/python scripts/reading_metrics.py

# Chromium for the browser test (scripts/ensure_chromium.sh).
chromium:
	@scripts/ensure_chromium.sh

# Quick loop while writing minigrad: no notebooks, no book, no `slow` cases (the
# exhaustive and multi-process ones, and all but a spread of each grid: tests/marks.py);
# phase 1 of `make test` runs them all, each once.
unit: $(STAMP)
	$(BIN)/python -m pytest -n $(TEST_JOBS) -q -m "not book and not slow" tests

# After editing a chapter: every rewriter, in the order each needs, then the notebook
# executed so its stored outputs are what the code prints (NB=notebooks/ch07_*.ipynb;
# several allowed). move_checks moves checks into removed cells and format_notebooks
# formats the code that moved (both change code, so execution follows them);
# fold_listings and link_glossary change Markdown only. Idempotent: a second run
# changes nothing.
fix: $(STAMP)
	@test -n "$(NB)" || { echo "usage: make fix NB=notebooks/chNN_slug.ipynb"; exit 2; }
	$(BIN)/python scripts/move_checks.py $(NB)
	$(BIN)/python scripts/format_notebooks.py $(NB)
	$(BIN)/python scripts/execute_notebooks.py $(NB)
	$(BIN)/python scripts/fold_listings.py $(NB)
	$(BIN)/python scripts/link_glossary.py $(NB)

# Check a chapter as make test does: strict nbval natively and on the simulated CPU,
# and the notebook-level tests (structure, page rules, portability; every notebook, 6 s).
check: $(STAMP)
	@test -n "$(NB)" || { echo "usage: make check NB=notebooks/chNN_slug.ipynb"; exit 2; }
	$(BIN)/python -m pytest -q $(NBVAL) $(NB)
	$(BIN)/python scripts/simulated_cpu.py $(BIN)/python -m pytest -q $(NBVAL) $(NB)
	$(BIN)/python -m pytest -q -m "not book" tests/test_config.py tests/test_reader_pages.py \
		tests/test_portability.py tests/test_notebook_format.py tests/test_figures.py \
		tests/test_glossary.py

# The HTML book from the stored outputs (no execution; what make test's phase 4 builds).
html: $(STAMP)
	$(BIN)/python scripts/build_book.py --stored-outputs

# Re-execute notebooks in place so their stored outputs are what the code prints
# (NOTEBOOKS=notebooks/ch07_*.ipynb for one).
NOTEBOOKS ?= notebooks/*.ipynb
notebooks: $(STAMP)
	$(BIN)/python scripts/execute_notebooks.py $(NOTEBOOKS)

# Every notebook under the declared minimum versions and under the newest available
# ones, each copied alone into an empty folder; prints the table and writes
# reports/compat.md. Not part of `make test` (two stacks of several GB, in .compat/).
compat: $(STAMP)
	$(BIN)/python scripts/compat.py

benchmark: $(STAMP)
	$(BIN)/python benchmarks/step_time.py

clean:
	rm -rf _build

# --- Course assignments (assignments/, scripts/assignments.py) -----------------------------
# otter-grader gets its own environment layered on .venv, so the book's stays without it.
# Building and grading need minigrad, NumPy, nbformat and otter (assignments/requirements.txt)
# and, for a5 only, torch.
GRADE_VENV  := .venv-grade
GRADE_STAMP := $(GRADE_VENV)/.installed
TIMEOUT     ?= 60
JOBS        ?= 1
SEED        ?=

.PHONY: assignments grade bwrap

# With the book's .venv (make test): layered on it. Without it (an instructor's fresh clone):
# the light set of assignments/requirements.txt, minigrad, and the book's torch pin (a5
# uses it; on Linux, PIP_EXTRA_INDEX_URL=https://download.pytorch.org/whl/cpu gets the
# CPU-only wheel instead of PyPI's CUDA one).
$(GRADE_STAMP): assignments/requirements.txt
	rm -rf $(GRADE_VENV)
	@if [ -x $(BIN)/python ]; then \
		$(PYTHON) -m venv --without-pip $(GRADE_VENV) && \
		$(BIN)/python scripts/assignments.py link-venv $(GRADE_VENV) $(VENV); \
	else \
		$(PYTHON) -m venv $(GRADE_VENV) && \
		$(GRADE_VENV)/bin/python -m pip install --quiet --disable-pip-version-check --no-deps -e . && \
		$(GRADE_VENV)/bin/python -m pip install --quiet --disable-pip-version-check \
			$$(grep '^torch==' requirements.txt); \
	fi
	$(GRADE_VENV)/bin/python -m pip install --quiet --disable-pip-version-check -r assignments/requirements.txt
	touch $(GRADE_STAMP)

# otter assign every master: _build/assignments/<name>/{student,autograder}/ (autograder/
# holds grader/ and <name>-gradescope.zip), and the student version copied to
# book/assignments/<name>/. SEED=<int> draws the hidden inputs (default: a random seed,
# recorded in autograder/grader/payload.json); each solution is graded in the sandbox.
assignments: $(GRADE_STAMP) bwrap
	$(GRADE_VENV)/bin/python scripts/assignments.py build --book $(if $(SEED),--seed $(SEED))

# Grade every file in SUBMISSIONS, each alone in a bubblewrap sandbox (one per question),
# TIMEOUT seconds per test, JOBS submissions at a time: writes SUBMISSIONS/scores.csv,
# SUBMISSIONS/feedback/ (for students) and SUBMISSIONS/results/ (for you).
grade: $(GRADE_STAMP) bwrap
	@test -n "$(ASSIGNMENT)" -a -n "$(SUBMISSIONS)" || \
		{ echo "usage: make grade ASSIGNMENT=<name> SUBMISSIONS=<folder> [TIMEOUT=<seconds per test>] [JOBS=<n>]"; exit 2; }
	$(GRADE_VENV)/bin/python scripts/assignments.py grade $(ASSIGNMENT) $(SUBMISSIONS) --timeout $(TIMEOUT) --jobs $(JOBS)

# bubblewrap for the grading sandbox (scripts/ensure_bwrap.sh).
bwrap:
	@scripts/ensure_bwrap.sh

# tests/test_assignments.py runs otter and the sandboxed grader from the grading environment.
test: $(GRADE_STAMP) bwrap
