"""What faults and hostile tenants do: services killed and cut off under load with nothing lost, and one tenant's calls or work against another's.

bench/README.md lists them.
"""
