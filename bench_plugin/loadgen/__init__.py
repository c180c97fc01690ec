"""Load generators: the Locust processes that send a campaign's arrivals, and the proof that they did.

- protocol: the custom messages between the master and its workers, and who a worker is.
- shares: which process sends which arrivals of a class in a stage.
- ledger: one stage's accounting (every arrival sent exactly once, every sample arrived).
- fleet: the master's (or local runner's) view of its load generators.
- worker: a worker's side: taking the campaign from the master and shipping samples back.
- sizing: how many load-generating processes a scenario's planned load needs on this host.
"""
