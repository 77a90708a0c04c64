"""The shipped scenarios (YAML files; ``dockbench run --scenario NAME`` finds them by name)."""
