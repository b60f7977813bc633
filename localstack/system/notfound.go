package system

import (
	"errors"

	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/botharness/outbox/core"
)

func bucketExists(err error) bool {
	var owned *s3types.BucketAlreadyOwnedByYou
	var exists *s3types.BucketAlreadyExists
	return errors.As(err, &owned) || errors.As(err, &exists)
}

func isNotFound(err error) bool { return errors.Is(err, core.ErrNotFound) }
