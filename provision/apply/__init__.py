"""Apply: run the planned playbooks through ansible-runner and read the results as data."""
