module github.com/tq-dev/tq/examples/go

go 1.25

require github.com/tq-dev/tq-go v0.0.0

// The binding in this repository.
replace github.com/tq-dev/tq-go => ../../bindings/go
