"""The frequency model and the policies: workloads, features, training, evaluation, apply."""
