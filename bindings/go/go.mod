module tq.dev/tq

go 1.25
