//go:build !unix

package digest_test

import "errors"

func mkfifo(string) error { return errors.ErrUnsupported }
