# The two entry points of the README. Both set everything up first.
.PHONY: demo test setup bench clean-venv

setup:
	scripts/bootstrap.sh

demo: setup
	.venv/bin/aiot demo

test: setup
	.venv/bin/python -m pytest -m "slow or not slow" -q

bench: setup
	.venv/bin/python bench/cli_startup.py
	.venv/bin/python bench/agent_fidelity.py
	.venv/bin/python bench/transports.py

clean-venv:
	rm -rf .venv
