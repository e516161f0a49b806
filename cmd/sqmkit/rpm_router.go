//go:build router

package main

import (
	"context"
	"errors"
	"log"

	"github.com/sqmkit/sqmkit/internal/bbresult"
)

// errRPMNotBuilt: see rpm_full.go.
var errRPMNotBuilt = errors.New("the responsiveness (RPM) test is not in the router build; run it from a computer with a full build")

func measureRPM(context.Context, string, rpmOptions) (*bbresult.RPM, []string, error) {
	return nil, nil, errRPMNotBuilt
}

func startRPM(context.Context, string, string, string, *log.Logger) (func() error, error) {
	return nil, errRPMNotBuilt
}
