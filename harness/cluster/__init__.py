"""Where the ranks run: emulated nodes on this machine, or real hosts.

emulated   an N-node cluster of network namespaces on a bridge, shaped by tc, each node on its own cores
state      the state files of the emulated clusters (who owns them, what to tear down)
cpusets    a node's cores as a cpuset cgroup
agent      what mpiexec runs in place of ssh (agent.sh) to start a rank inside an emulated node
rates      link rates ("1gbit") and tbf's burst for them
hosts      real hosts: interface counters and tc shaping, over ssh or srun
slurm      a Slurm allocation: its nodes, srun launches, sbatch scripts
launch     the mpiexec command lines and environment for each kind of cluster
"""
