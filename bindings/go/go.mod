module github.com/tq-dev/tq-go

go 1.25
