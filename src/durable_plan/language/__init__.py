"""The plan language: plans, steps and results, the model's spec of them, the step kinds,
the bounds every plan lives within, and the owner's options a plan may only tighten."""
