from django.urls import path

from routing import views

app_name = "routing"

urlpatterns = [
    path("inbox/", views.inbox, name="inbox"),
    path("mine/", views.my_questions, name="mine"),
    path("q/<id:question_id>/", views.question_detail, name="question"),
    path("q/<id:question_id>/publish/", views.question_publish, name="publish"),
    path("q/<id:question_id>/close/", views.question_close, name="close"),
    path("report/<str:slug>/", views.report, name="report"),
    path("report/<str:slug>/csv/", views.report_csv, name="report_csv"),
    path("q/<id:question_id>/outdated/", views.review_outdated, name="review_outdated"),
    path("q/<id:question_id>/dismiss/", views.review_dismiss, name="review_dismiss"),
    path("escalate/<id:message_id>/", views.escalate, name="escalate"),
    path("notifications/", views.notification_settings, name="notifications"),
    path("whats-new/", views.whats_new, name="whats_new"),
]

urlpatterns += [
    path("knowledge/", views.knowledge_list, name="knowledge"),
    path("knowledge/<id:verified_id>/", views.knowledge_detail, name="knowledge_detail"),
    path("knowledge/<id:verified_id>/reverify/", views.knowledge_reverify, name="knowledge_reverify"),
    path("knowledge/<id:verified_id>/retire/", views.knowledge_retire, name="knowledge_retire"),
    path("feedback/<id:message_id>/", views.feedback, name="feedback"),
]
