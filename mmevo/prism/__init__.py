"""Prism (semantic coverage against curriculum collapse): the offline cluster space (``clusters``). The coverage reward
itself is ``mmevo.rewards.prism`` (pure functions + the ``prism_coverage`` head)."""

from mmevo.prism.clusters import assign_clusters, build_clusters, load_centroids, load_corpus  # noqa: F401
