//! The httpvs reference server: one process serving HTTP/1.1, h2c, h2 over TLS and HTTP/3.
