"""The RL family: the recipe the family reads (recipe.py), the vLLM rollout's memory and gpu_memory_utilization
(rollout.py), the published Ascend RL throughput (rates.py) and the Ray cluster's head/join bootstrap
(templates/rl/_ray_cluster.sh.j2)."""
