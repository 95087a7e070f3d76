# The two commands of the README: `make demo` (the main job) and `make test`.
VENV   ?= .venv
PY     := $(VENV)/bin/python
# CPU build of torch pinned for the development machines and CI; the package itself accepts any recent torch.
TORCH  ?= torch==2.13.0
RUN    ?= runs/demo

.PHONY: install demo test bench clean

$(VENV)/.installed: pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q "$(TORCH)"
	$(PY) -m pip install -q -e ".[dev,ray,tensorboard,interop,mlflow]"
	touch $@

install: $(VENV)/.installed

demo: install
	$(VENV)/bin/tinyscope run plus-last-even --preset cpu --seed 0 --out $(RUN)

test: install
	OMP_NUM_THREADS=2 $(PY) -m pytest

clean:
	rm -rf $(VENV) runs build src/*.egg-info
