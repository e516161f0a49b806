//go:build router

package main

import (
	"errors"

	"github.com/sqmkit/sqmkit/internal/bbresult"
	"github.com/sqmkit/sqmkit/internal/search"
)

// errNotInRouterBuild: see outputs_full.go.
var errNotInRouterBuild = errors.New("not in the router build; write --json here and render it elsewhere with a full build (sqmkit test --compare, or the plot from the same JSON)")

func writePlot(string, *bbresult.Result) error   { return errNotInRouterBuild }
func writeFlent(string, *bbresult.Result) error  { return errNotInRouterBuild }
func writeTunePlot(string, *search.Result) error { return errNotInRouterBuild }
