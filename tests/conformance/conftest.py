"""The checked-in corpus is data, not tests: pytest does not descend into it."""
collect_ignore = ["corpus"]
