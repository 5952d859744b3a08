#include "client_lib/src/cupti/fake/fake_cupti_table.h"

namespace gpuctl::client::cupti::testing {

CuptiApi FakeCuptiApi() {
  CuptiApi api;
  api.Subscribe = &cuptiSubscribe;
  api.Unsubscribe = &cuptiUnsubscribe;
  api.EnableDomain = &cuptiEnableDomain;
  api.Finalize = &cuptiFinalize;
  api.GetResultString = &cuptiGetResultString;
  api.GetVersion = &cuptiGetVersion;
  api.ActivityEnable = &cuptiActivityEnable;
  api.ActivityDisable = &cuptiActivityDisable;
  api.ActivityRegisterCallbacks = &cuptiActivityRegisterCallbacks;
  api.ActivityFlushAll = &cuptiActivityFlushAll;
  api.ActivityGetNextRecord = &cuptiActivityGetNextRecord;
  api.ActivityGetNumDroppedRecords = &cuptiActivityGetNumDroppedRecords;
  api.ActivitySetAttribute = &cuptiActivitySetAttribute;
  api.ActivityPushExternalCorrelationId = &cuptiActivityPushExternalCorrelationId;
  api.ActivityPopExternalCorrelationId = &cuptiActivityPopExternalCorrelationId;
  api.GetTimestamp = &cuptiGetTimestamp;
  api.ActivityRegisterTimestampCallback = &cuptiActivityRegisterTimestampCallback;
  api.GetCallbackName = &cuptiGetCallbackName;
  api.path = "fake";
  return api;
}

}  // namespace gpuctl::client::cupti::testing
