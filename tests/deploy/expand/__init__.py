"""A test-only app whose one migration is an "expand" step (docs/deploy.md): a new
nullable column on a table every /v1 request writes, applied by `migrate` while the
topology serves (tests/deploy/test_it_runs_the_production_topology.py)."""
