package admin

import (
	"context"
	"errors"
	"log/slog"
	"net/http"

	"github.com/aws/aws-lambda-go/events"

	"github.com/botharness/outbox/adapters/backup"
	"github.com/botharness/outbox/adapters/handlers/httpjson"
	"github.com/botharness/outbox/core"
)

// Route is an extra admin route.
type Route = func(ctx context.Context, p core.Principal, req events.APIGatewayV2HTTPRequest) events.APIGatewayV2HTTPResponse

// BackupRoutes serves profile backup and managed restore (operators only).
func BackupRoutes(svc *backup.Service, log *slog.Logger) map[string]Route {
	operatorOnly := func(f Route) Route {
		return func(ctx context.Context, p core.Principal, req events.APIGatewayV2HTTPRequest) events.APIGatewayV2HTTPResponse {
			if p.Kind != core.PrincipalOperator {
				return httpjson.Error(http.StatusForbidden, "forbidden", "only operators run backups and restores", "")
			}
			return f(ctx, p, req)
		}
	}
	fail := func(ctx context.Context, err error) events.APIGatewayV2HTTPResponse {
		if errors.Is(err, backup.ErrInvalidSnapshot) {
			return httpjson.Error(http.StatusUnprocessableEntity, "snapshot_invalid", err.Error()+"; nothing was written", "")
		}
		return Fail(ctx, log, err)
	}
	return map[string]Route{
		"POST /v1/admin/backups": operatorOnly(func(ctx context.Context, p core.Principal, req events.APIGatewayV2HTTPRequest) events.APIGatewayV2HTTPResponse {
			var body struct {
				Profile string `json:"profile"`
			}
			if resp, ok := DecodeBody(req, &body); !ok {
				return resp
			}
			if err := core.CheckID("profile", body.Profile); err != nil {
				return fail(ctx, err)
			}
			m, err := svc.Backup(ctx, body.Profile)
			if err != nil {
				return fail(ctx, err)
			}
			return httpjson.JSON(http.StatusCreated, m, map[string]string{"Location": "/v1/admin/backups/" + m.BackupID})
		}),
		"GET /v1/admin/backups/{backupId}": operatorOnly(func(ctx context.Context, p core.Principal, req events.APIGatewayV2HTTPRequest) events.APIGatewayV2HTTPResponse {
			m, err := svc.Manifest(ctx, req.PathParameters["backupId"])
			if err != nil {
				return fail(ctx, err)
			}
			return httpjson.JSON(http.StatusOK, m, nil)
		}),
		"POST /v1/admin/restores": operatorOnly(func(ctx context.Context, p core.Principal, req events.APIGatewayV2HTTPRequest) events.APIGatewayV2HTTPResponse {
			var body struct {
				BackupID string `json:"backupId"`
			}
			if resp, ok := DecodeBody(req, &body); !ok {
				return resp
			}
			if err := core.CheckID("backupId", body.BackupID); err != nil {
				return fail(ctx, err)
			}
			rep, err := svc.Restore(ctx, body.BackupID)
			if err != nil {
				return fail(ctx, err)
			}
			return httpjson.JSON(http.StatusOK, rep, nil)
		}),
	}
}
