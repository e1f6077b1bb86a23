"""The topology spec's syntax as text, without networkx: the ``file:`` prefix and the help naming every kind (the
command line's options show it; ``crc.topologies.spec`` parses by it)."""

FILE_PREFIX = "file:"

HELP = ("tree, tree+K (K extra random edges), chain, star, ring, complete, grid, "
        "er[:P] (connected Erdos-Renyi), regular[:D] (random D-regular), small-world[:K[:P]], file:PATH (a graph file)")
