module github.com/tq-dev/tq/tests/ext/go

go 1.26.0

require (
	github.com/mattn/go-sqlite3 v1.14.53
	github.com/tq-dev/tq-go v0.0.0
)

replace github.com/tq-dev/tq-go => ../../../bindings/go
