//! Network emulation: a deterministic netem core (packet in at t, packets out at their times) and a TUN relay shell.
