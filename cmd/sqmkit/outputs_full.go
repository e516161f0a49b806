//go:build !router

package main

import (
	"github.com/sqmkit/sqmkit/internal/bbresult"
	"github.com/sqmkit/sqmkit/internal/report/flent"
	"github.com/sqmkit/sqmkit/internal/report/plot"
	"github.com/sqmkit/sqmkit/internal/search"
)

// The full build renders plots and flent files; the router build (tag
// router) leaves both out: a router never shows a plot, and the renderer
// with its fonts is most of the binary.
func writePlot(name string, r *bbresult.Result) error   { return plot.WritePlot(name, r) }
func writeFlent(name string, r *bbresult.Result) error  { return flent.WriteFlent(name, r) }
func writeTunePlot(name string, r *search.Result) error { return plot.WriteTune(name, r) }
