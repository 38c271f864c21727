//! braid-topo: what a network and its traffic look like, before any simulation.
//!
//! Units with human forms ("40Gbps", "1us", "64KB"), topology specifications and the graphs
//! they build, traffic specifications and the flow lists they generate, and readers for the HPCC
//! ns-3 simulator's topology and flow files.
