module tq.dev/tq/examples

go 1.25

require tq.dev/tq v0.0.0

// The binding in this repository.
replace tq.dev/tq => ../../bindings/go
