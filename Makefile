# Two commands: `make book` builds the HTML book, `make test` runs every test.
# Both create .venv on first use (pinned requirements.txt + editable minigrad).
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
JB_FLAGS := -W -n --keep-going

.PHONY: book test notebooks unit clean venv benchmark

venv: $(STAMP)

$(STAMP): requirements.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -r requirements.txt
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation -e .
	touch $(STAMP)

# HTML book in _build/html, every notebook executed (cached by jupyter-cache).
book: $(STAMP)
	$(BIN)/jupyter-book build . $(JB_FLAGS)

# The whole suite: unit and property tests, strict nbval on every notebook,
# the Colab-style run outside the repository, the coverage table and a
# headless-browser check of the built book (so the book is built first).
test: book
	$(BIN)/python -m pytest --nbval --nbval-current-env --nbval-sanitize-with tests/nbval_sanitize.cfg \
		--durations=15 tests notebooks

# Quick loop while writing minigrad: no notebooks, no book.
unit: $(STAMP)
	$(BIN)/python -m pytest tests -m "not book" -q

# Re-execute every notebook in place so its stored outputs are what the code prints.
notebooks: $(STAMP)
	$(BIN)/python scripts/execute_notebooks.py notebooks/*.ipynb

benchmark: $(STAMP)
	$(BIN)/python benchmarks/step_time.py

clean:
	rm -rf _build

# --- Course assignments (assignments/, scripts/assignments.py) -----------------------------
# otter-grader gets its own environment layered on .venv, so the book's stays without it.
GRADE_VENV  := .venv-grade
GRADE_STAMP := $(GRADE_VENV)/.installed
TIMEOUT     ?= 300
JOBS        ?= 1

.PHONY: assignments grade

$(GRADE_STAMP): $(STAMP) assignments/requirements.txt
	rm -rf $(GRADE_VENV)
	$(PYTHON) -m venv --without-pip $(GRADE_VENV)
	$(BIN)/python scripts/assignments.py link-venv $(GRADE_VENV) $(VENV)
	$(GRADE_VENV)/bin/python -m pip install --quiet --disable-pip-version-check -r assignments/requirements.txt
	touch $(GRADE_STAMP)

# otter assign every master: _build/assignments/<name>/{student,autograder}/, and the
# student version copied to book/assignments/<name>/ (what the book shows and Colab opens).
assignments: $(GRADE_STAMP)
	$(GRADE_VENV)/bin/python scripts/assignments.py build --book

# Grade every file in SUBMISSIONS with otter run (no Docker), TIMEOUT seconds each, JOBS
# at a time: writes SUBMISSIONS/scores.csv and SUBMISSIONS/results/.
grade: $(GRADE_STAMP)
	@test -n "$(ASSIGNMENT)" -a -n "$(SUBMISSIONS)" || \
		{ echo "usage: make grade ASSIGNMENT=<name> SUBMISSIONS=<folder> [TIMEOUT=<seconds>] [JOBS=<n>]"; exit 2; }
	$(GRADE_VENV)/bin/python scripts/assignments.py grade $(ASSIGNMENT) $(SUBMISSIONS) --timeout $(TIMEOUT) --jobs $(JOBS)

# tests/test_assignments.py runs otter from the grading environment.
test: $(GRADE_STAMP)
