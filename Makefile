# The two entry points of the README. Both set everything up first.
.PHONY: demo test setup bench docs clean-venv

setup:
	scripts/bootstrap.sh

demo: setup
	.venv/bin/aiot demo

# AIOT_REQUIRE_TOOLCHAINS: bootstrap installed them, so a missing one fails instead of skipping.
# --durations: the slowest tests, printed at the end; --timeout (pytest-timeout): a test that
# hangs fails with its name and stack after 15 minutes instead of eating CI's whole limit.
# Downloads and third-party artifacts are kept between runs in ~/.cache/aiot-tests
# (AIOT_TEST_CACHE moves it). -n auto (pytest-xdist): a worker per core and one more, for the
# tests that wait (tests/conftest.py); --dist loadgroup keeps the tests that start Ray on one
# worker (tests/conftest.py marks them). import-linter's layers contract is one of the tests
# (tests/test_house.py runs scripts/lint_imports.py).
test: setup
	AIOT_REQUIRE_TOOLCHAINS=1 .venv/bin/python -m pytest -m "slow or not slow" -q --durations=25 --timeout=900 -n auto --dist loadgroup

bench: setup
	.venv/bin/python bench/cli_startup.py
	.venv/bin/python bench/agent_fidelity.py
	.venv/bin/python bench/transports.py
	.venv/bin/python bench/formats.py
	.venv/bin/python bench/conversion_cache.py
	.venv/bin/aiot toolchains install onnx2tf
	.venv/bin/python bench/tflite_paths.py
	.venv/bin/python bench/bibench.py
	.venv/bin/python bench/campaign.py
	.venv/bin/python bench/agent_session.py
	.venv/bin/python bench/robust.py

# The reference pages made from the code again (commit them), then the site in strict mode
# (site/, git-ignored); `.venv/bin/mkdocs serve` shows it while you write.
docs: setup
	.venv/bin/python scripts/docs_reference.py
	NO_MKDOCS_2_WARNING=1 .venv/bin/mkdocs build --strict

clean-venv:
	rm -rf .venv
