"""The kubernetes backend: applies each arm through the Kubernetes API (device-plugin sharing config,
node labels, workload Deployments and Services), checks it first (preflight), records what the cluster
did (the pod timeline), and puts back everything it changed. Needs the ``kubernetes`` extra."""
