module tq.dev/tq/bench/goqite

go 1.26.0

require (
	github.com/maragudk/goqite v0.2.3
	github.com/mattn/go-sqlite3 v1.14.53
	tq.dev/tq v0.0.0
)

replace tq.dev/tq => ../../bindings/go
