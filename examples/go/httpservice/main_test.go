package main

import (
	"log"
	"strings"
	"testing"
)

func TestSelfTest(t *testing.T) {
	var output strings.Builder
	if err := selfTest(t.Context(), log.New(&output, "", 0)); err != nil {
		t.Fatalf("%v\nservice log:\n%s", err, output.String())
	}
	if output.Len() != 0 {
		t.Fatalf("the service logged:\n%s", output.String())
	}
}
