-- kobe keeps its own store (pools, instances, leases, quotas, audit) in a database of its own;
-- kobe applies its schema migrations itself at start.
CREATE DATABASE kobe;
